# docs/profile.schema.json against the profile parser (src/profile.c): the schema is a valid
# draft 2020-12 schema, every profile in docs/examples and every example inside the schema
# validates, and documents that the parser rejects (the same cases as tests/unit/test_profile.c)
# are rejected by the schema too, so that the two stay in step. The unit tests check that the
# parser accepts every file in docs/examples.
#
# Needs python3 with the jsonschema module; without it the tests SKIP.

profile_schema_need() {
	[ -f "${DOCS:?DOCS is set by tests/run.sh}/profile.schema.json" ] ||
		fail "schema not found: $DOCS/profile.schema.json"
	python3 -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
		skip "python3 has no jsonschema module (apt-get install python3-jsonschema)"
}

test_profile_schema_examples() {
	profile_schema_need
	python3 - "$DOCS/profile.schema.json" "$DOCS"/examples/*.json <<'PY'
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
bad = 0
docs = [(f"schema example {i}", d) for i, d in enumerate(schema.get("examples", []))]
docs += [(p, json.load(open(p))) for p in sys.argv[2:]]
if len(docs) < 4:
    sys.exit(f"expected examples in the schema and in docs/examples, found {len(docs)}")
for name, doc in docs:
    for e in v.iter_errors(doc):
        bad += 1
        print(f"{name}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

test_profile_schema_rejects() {
	profile_schema_need
	python3 - "$DOCS/profile.schema.json" <<'PY'
import json, sys
from jsonschema import Draft202012Validator
v = Draft202012Validator(json.load(open(sys.argv[1])))
rejected = [
    {"netwrok": "none"}, {"limits": {"memroy": "1G"}}, {"filesystem": {"read": ["a", 42]}},
    {"limits": {"memory": "12Q"}}, {"limits": {"memory": 512}}, {"limits": {"nofile": 8}},
    {"limits": {"output": 0}}, {"limits": {"tmpfs": 0}}, {"limits": {"pids": "128"}},
    {"limits": {"timeout": -1}}, {"limits": {"timeout": "5x"}}, {"limits": {"kill_after": 7200}},
    {"limits": {"cpu": 0.5}}, {"mode": "strict"}, {"network": "hots"},
    {"filesystem": {"workspace": True}}, {"filesystem": {"etc": "none"}},
    {"filesystem": {"protected": ["a/../b"]}}, {"filesystem": {"protected": ["/etc"]}},
    {"filesystem": {"protected": ["~/.bashrc"]}}, {"filesystem": {"deny": [""]}},
    {"filesystem": {"write": ["~bob/x"]}}, {"env": {"allow": ["LC-*"]}},
    {"env": {"set": {"1BAD": "x"}}}, {"env": {"set": {"N": 1}}}, {"env": {"deny_replace": "yes"}},
    {"commands": {"allow": ["bin/git"]}}, {"commands": {"deny": [{"match": "rm -rf"}]}},
    {"commands": {"deny": [{"reason": "x"}]}}, {"commands": {"deny": [{"match": "x", "reason": 5}]}},
    {"commands": {"deny": [True]}}, {"commands": {"deny": [{"match": "b", "reson": "x"}]}},
    [{}], "default", {"description": None},
]
accepted = [
    {}, {"commands": {"allow": []}}, {"filesystem": {"protected": []}},
    {"limits": {"memory": 1e9, "fsize": 0, "timeout": 0, "cpu": 5, "pids": 0}},
    {"limits": {"timeout": 1.5, "kill_after": "250ms", "memory": "512M", "cpu": "2m",
                "nofile": 64, "fsize": 1048576, "tmpfs": "1G", "output": "64k"}},
    {"filesystem": {"read": ["~", "~/x"]}}, {"env": {"set": {"A": "x", "_X1": ""}}},
]
bad = 0
for doc in rejected:
    if v.is_valid(doc):
        bad += 1
        print(f"the schema accepts {json.dumps(doc)}, which the parser rejects", file=sys.stderr)
for doc in accepted:
    for e in v.iter_errors(doc):
        bad += 1
        print(f"the schema rejects {json.dumps(doc)}, which the parser accepts: {e.message}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
