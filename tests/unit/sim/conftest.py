"""The stand-in group fixtures, shared by the engine tests, the command-line tests and the start-phase tests."""

from tests.unit.sim.test_standin_engine import new_group  # noqa: F401 (a fixture: pytest finds it here)
from tests.unit.sim.test_standin_vllm import new_vllm_group  # noqa: F401 (a fixture, as above)
