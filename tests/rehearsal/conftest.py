"""Fixtures for tests/rehearsal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(scope="session")
def cfn_assembly(tmp_path_factory: pytest.TempPathFactory):
    """The project's cloud assembly, synthesized once per session without the Lambda layer (~15-60 s)."""
    from infra.app import SynthFailedError, build_app, synth
    from rehearsal.cfn import load_assembly

    os.environ.pop("CDK_CONTEXT_JSON", None)
    outdir: Path = tmp_path_factory.mktemp("rehearsal-cdk.out")
    built = build_app(outdir=str(outdir), context={"neuronpipe": {"require_lambda_deps": False}})
    try:
        synth(built)
    except SynthFailedError:  # cdk-nag findings are tests/infra's business; the templates are written
        pass
    return load_assembly(outdir)


def real_resolver(assembly):
    """A resolver over the real assembly, with the two box instances given physical ids (EC2 ids are not derived)."""
    from rehearsal.cfn import Resolver

    res = Resolver(assembly)
    for stack, iid in (("NeuronPipelinesTrainium", "i-0trn1"), ("NeuronPipelinesInferentia", "i-0inf2")):
        (lid,) = assembly.template(stack).of_type("AWS::EC2::Instance")
        res.set_physical_id(stack, lid, iid)
    return res


@pytest.fixture
def faults(rehearsal):
    """A fault case's injections (tests.support.faults.Faults) on its module's ``rehearsal`` (a world from
    tests.support.faults.fault_rehearsal), undone after; the world is left clean for the next case."""
    from tests.fixtures import rehearsal_lanes
    from tests.support.faults import Faults, boxes_left_running, clean_slate, leases_held

    assert not boxes_left_running(rehearsal) and not leases_held(rehearsal), "a case started on a dirty world"
    with Faults(rehearsal) as f:
        yield f
    (rehearsal.fault_markers / rehearsal_lanes.FAIL_FILE).unlink(missing_ok=True)
    rehearsal.settle()
    clean_slate(rehearsal)  # a failed case must not fail the next one


@pytest.fixture
def say(capsys):
    """Print a line past pytest's capture (a case's outcome line: instances left running)."""

    def line(text: str) -> None:
        with capsys.disabled():
            print(f"\n{text}", flush=True)

    return line
