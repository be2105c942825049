/* Pipelines, internal to libcorral and the CLI (src/pipeline.c). */
#ifndef CORRAL_PIPELINE_H
#define CORRAL_PIPELINE_H

#include "corral.h"

/* corral_pipeline_spawn(), and on failure *failed is the index of the stage that could not be
 * started (-1 when the failure is not one stage's, e.g. a bad stage count). */
int pipeline_spawn(const corral_config *const *stages, size_t n, corral_pipeline **out, int *failed,
                   struct corral_error *err);
/* What corral_pipeline_run() returns for a pipeline that could not be started: no stages,
 * error e, failed_stage failed, exit_code 127, 126 or 125 as for the error. NULL on ENOMEM. */
struct corral_pipeline_result *pipeline_failed_result(int failed, const struct corral_error *e);

#endif
