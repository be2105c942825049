# corral — GNU Make build. `make` builds corral, libcorral.a and libcorral.so;
# `make check` runs the whole suite; `make check-asan` the same under ASan+UBSan.
CC ?= cc
PKGS := libseccomp jansson sqlite3 nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
BUILD ?= build
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-missing-field-initializers
override CFLAGS += -std=gnu11 $(WARN) -fvisibility=hidden -fPIC -D_GNU_SOURCE \
	-Iinclude -Isrc $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS := $(PKG_LIBS) $(EXTRA_LDFLAGS)

LIB_SRCS := $(wildcard src/*.c) $(wildcard src/sandbox/*.c)
CLI_SRCS := $(wildcard src/cli/*.c) $(wildcard src/mcp/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)

all: $(BUILD)/corral $(BUILD)/libcorral.a $(BUILD)/libcorral.so

Q := $(if $(V),,@)

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The seccomp programs are compiled at build time (docs/DESIGN.md §8): tools/seccomp_gen.c,
# linked with seccomp.c (which then leaves out the include below) and libseccomp, writes
# $(BUILD)/gen/seccomp_baked.h, which seccomp.c includes. It runs here, so it is built with
# plain flags: no sanitizer or fuzzer runtime of the build's CFLAGS. A change to seccomp.c or
# a header rebuilds it; the unit test seccomp_baked_* fails on a program that is out of date.
GEN_CFLAGS := -std=gnu11 -O1 $(WARN) -D_GNU_SOURCE -DCORRAL_SECCOMP_GEN -Iinclude -Isrc \
	$(PKG_CFLAGS)
SECCOMP_GEN_SRCS := tools/seccomp_gen.c src/sandbox/seccomp.c src/error.c

$(BUILD)/tools/seccomp_gen: $(SECCOMP_GEN_SRCS) $(wildcard include/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(GEN_CFLAGS) -o $@ $(SECCOMP_GEN_SRCS) $(shell pkg-config --libs libseccomp 2>/dev/null)

$(BUILD)/gen/seccomp_baked.h: $(BUILD)/tools/seccomp_gen
	@mkdir -p $(dir $@)
	$< $@

$(BUILD)/src/sandbox/seccomp.o: $(BUILD)/gen/seccomp_baked.h
$(BUILD)/src/sandbox/seccomp.o: override CFLAGS += -I$(BUILD)/gen

$(BUILD)/libcorral.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libcorral.so: $(LIB_OBJS)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libcorral.so.0 -o $@ $^ $(LDLIBS)

# The CLI is a static PIE, glibc included: a one-shot launch starts the binary every time,
# and the dynamic loader's mapping, relocation and symbol lookups (glibc's ~240 imports) were
# a tenth of it (docs/DESIGN.md §18). corral calls nothing of glibc that loads modules at
# run time (no NSS lookups, no iconv, no dlopen); the linker's warning about dlopen in a
# static binary comes from SQLite's extension loading, which corral never enables.
# CORRAL_LINK=dynamic links glibc dynamically (the other libraries stay static): the
# sanitizer build needs it (ASan has no static runtime), and so does valgrind, whose leak
# check replaces a dynamic malloc ($(BUILD)/corral-dynamic, check-valgrind).
CORRAL_LINK ?= static
CLI_LINK_DYNAMIC := -Wl,-Bstatic $(PKG_LIBS) -Wl,-Bdynamic -lm -lpthread -ldl
ifeq ($(CORRAL_LINK),dynamic)
CLI_LINK := $(CLI_LINK_DYNAMIC)
else
CLI_LINK := -static-pie $(PKG_LIBS) -lm -lpthread
endif

$(BUILD)/corral: $(CLI_OBJS) $(BUILD)/libcorral.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libcorral.a $(CLI_LINK) $(EXTRA_LDFLAGS)

$(BUILD)/corral-dynamic: $(CLI_OBJS) $(BUILD)/libcorral.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libcorral.a $(CLI_LINK_DYNAMIC) $(EXTRA_LDFLAGS)

# ---- install ----------------------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, the library (static and shared),
# the header and the man page. The binary needs no installed library (it links libcorral and
# its dependencies statically). The directories are plain assignments: `make PREFIX=...`
# overrides them, a same-named environment variable (LIBDIR exported by another toolchain,
# kept by sudo -E) does not. install builds nothing (under sudo that would leave root-owned
# files in the build directory): it installs what `make` built, and says so when it is missing.
PREFIX = /usr/local
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
MANDIR = $(PREFIX)/share/man
INSTALL_FROM := $(BUILD)/corral $(BUILD)/libcorral.a $(BUILD)/libcorral.so

install:
	@for f in $(INSTALL_FROM); do [ -f "$$f" ] || { \
		echo "make install: $$f is missing; run make first (as yourself, not as root)" >&2; \
		exit 1; }; done
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BUILD)/corral $(DESTDIR)$(BINDIR)/corral
	install -m 0644 $(BUILD)/libcorral.a $(DESTDIR)$(LIBDIR)/libcorral.a
	install -m 0755 $(BUILD)/libcorral.so $(DESTDIR)$(LIBDIR)/libcorral.so.0
	ln -sf libcorral.so.0 $(DESTDIR)$(LIBDIR)/libcorral.so
	install -m 0644 include/corral.h $(DESTDIR)$(INCLUDEDIR)/corral.h
	install -m 0644 docs/corral.1 $(DESTDIR)$(MANDIR)/man1/corral.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/corral $(DESTDIR)$(LIBDIR)/libcorral.a \
		$(DESTDIR)$(LIBDIR)/libcorral.so.0 $(DESTDIR)$(LIBDIR)/libcorral.so \
		$(DESTDIR)$(INCLUDEDIR)/corral.h $(DESTDIR)$(MANDIR)/man1/corral.1

# ---- tests ------------------------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/*.c)
$(BUILD)/tests/unit_tests: $(UNIT_SRCS) $(BUILD)/libcorral.a $(wildcard src/mcp/*.c src/mcp/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(UNIT_SRCS) $(BUILD)/libcorral.a $(LDLIBS)

$(BUILD)/tests/lib_tests: tests/integration/lib_tests.c $(BUILD)/libcorral.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libcorral.a $(LDLIBS)

# The probe runs inside sandboxes: static, so it needs nothing from the sandbox's /lib.
$(BUILD)/tests/probe: tests/probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -Wall -Wextra -Werror -static -o $@ $<

$(BUILD)/tests/nolayer: tests/nolayer.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

$(BUILD)/tests/session_tool: tests/session_tool.c $(BUILD)/libcorral.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libcorral.a $(LDLIBS)

$(BUILD)/tests/audit_tool: tests/audit_tool.c $(BUILD)/libcorral.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libcorral.a $(LDLIBS)

TEST_BINS := $(BUILD)/corral $(BUILD)/tests/unit_tests $(BUILD)/tests/lib_tests \
	$(BUILD)/tests/probe $(BUILD)/tests/nolayer $(BUILD)/tests/audit_tool \
	$(BUILD)/tests/session_tool

check: $(TEST_BINS)
	BUILD=$(BUILD) tests/run.sh

check-asan:
	CORRAL_SANITIZED=1 $(MAKE) BUILD=build-asan CC=clang CORRAL_LINK=dynamic CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" check

# corral mcp under valgrind memcheck, through a scripted session of every tool and error
# path: zero errors, zero leaks (tests/valgrind_mcp.py explains its --mode none).
check-valgrind: $(BUILD)/corral-dynamic
	python3 tests/valgrind_mcp.py $(BUILD)/corral-dynamic

# The MCP soak: 10,000 sequential and 2 x 2,000 concurrent calls against one server; every
# answer arrives, the audit store holds every call, RSS stays flat (tests/soak_mcp.py).
soak: $(BUILD)/corral
	python3 tests/soak_mcp.py $(BUILD)/corral

# Benchmarks against the peers (bench/deps.sh installs them once); not part of make check.
bench: $(BUILD)/corral
	CORRAL=$(abspath $(BUILD)/corral) bench/run.sh

# libFuzzer targets: every tests/fuzz/fuzz_*.c (jsonrpc, mcp, parse, glob, result_json,
# violations, profile, redact), each for the given seconds; clang with libclang-rt-14-dev
fuzz:
	tests/fuzz/run.sh 30

fuzz-long:
	tests/fuzz/run.sh 600

format:
	clang-format -i $(LIB_SRCS) $(CLI_SRCS) include/*.h src/*.h src/*/*.h tests/*.c tests/unit/*.c

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all install uninstall check check-asan check-valgrind fuzz fuzz-long bench format clean soak
