"""The example manifest for tfg workers beside TensorFlow servers
(examples/tf_cluster/docker-compose.yml) is checked, not started: its structure against a
schema of the compose fields it uses (jsonschema, when installed), and its TF_CONFIGs against
each other, the services and tfg's own TF_CONFIG reader."""
import json

import pytest

from conftest import ROOT
from tfg.executor.distributed.spec import task_from_tf_config
from tfg.passes.cluster_spec import parse_cluster

yaml = pytest.importorskip("yaml")
MANIFEST = ROOT / "examples" / "tf_cluster" / "docker-compose.yml"

# The part of the Compose specification this manifest uses, as a JSON Schema.
_STRINGS = {"type": "array", "items": {"type": "string"}}
SCHEMA = {
    "type": "object",
    "required": ["services"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]*$"},
        "services": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["image", "command"],
                "additionalProperties": False,
                "properties": {
                    "image": {"type": "string", "minLength": 1},
                    "command": {"oneOf": [{"type": "string"}, _STRINGS]},
                    "environment": {"type": "object",
                                    "additionalProperties": {"type": "string"}},
                    "expose": {"type": "array", "items": {"type": "string",
                                                          "pattern": "^[0-9]+$"}},
                    "volumes": _STRINGS,
                    "working_dir": {"type": "string"},
                    "depends_on": _STRINGS,
                },
            },
        },
    },
    "patternProperties": {"^x-": {}},
    "additionalProperties": False,
}


def _manifest():
    return yaml.safe_load(MANIFEST.read_text())


def test_manifest_matches_the_compose_schema():
    jsonschema = pytest.importorskip("jsonschema")
    doc = _manifest()
    jsonschema.validate(doc, SCHEMA)
    broken = json.loads(json.dumps(doc))
    del broken["services"]["tfg-worker-1"]["image"]
    with pytest.raises(jsonschema.ValidationError):  # the schema does refuse
        jsonschema.validate(broken, SCHEMA)


def test_tf_configs_agree_and_name_the_services():
    services = _manifest()["services"]
    configs = {name: s["environment"]["TF_CONFIG"] for name, s in services.items()
               if "TF_CONFIG" in s.get("environment", {})}
    parsed = {name: task_from_tf_config(text) for name, text in configs.items()}
    clusters = {json.dumps(jobs, sort_keys=True) for jobs, _, _ in parsed.values()}
    assert len(clusters) == 1  # one cluster for every task
    jobs = next(iter(parsed.values()))[0]
    tasks = {(job, index): name for name, (_, job, index) in parsed.items()}
    assert sorted(tasks) == [(j, i) for j, addrs in jobs.items() for i in range(len(addrs))]
    for (job, index), name in tasks.items():
        host, port = jobs[job][index].rsplit(":", 1)
        assert host == name and port in services[name]["expose"]
    # Task 0 a TensorFlow server, task 1 a tfg worker listening on all interfaces.
    assert "tf.distribute.Server" in "".join(services[tasks[("worker", 0)]]["command"])
    assert "tfg worker --bind 0.0.0.0" in " ".join(services[tasks[("worker", 1)]]["command"])
    # The trainer drives the same cluster with TensorFlow's protocol.
    trainer = services["trainer"]
    assert parse_cluster(trainer["environment"]["CLUSTER"]) == jobs
    assert "--engine tensorflow" in " ".join(trainer["command"])
