import compileall
import os
import pathlib

from hypothesis import HealthCheck, settings

# A small profile for CI and a large one for nightly runs: HYPOTHESIS_PROFILE=nightly.
settings.register_profile("ci", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("nightly", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("clients", "broker", "quorum", "metadata_log", "chaos", "tests")


def pytest_sessionstart(session):
    # The tests start hundreds of node, CLI and worker processes. Where
    # PYTHONDONTWRITEBYTECODE is set (as on the CI machine) each of them would compile every
    # module it imports from source (~0.6 s of CPU per process; the generated protocol
    # schemas alone are 360 KB); compiling once here lets them load bytecode instead.
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)
