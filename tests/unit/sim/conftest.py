"""The stand-in group fixture, shared by the engine tests and the command-line tests of this folder."""

from tests.unit.sim.test_standin_engine import new_group  # noqa: F401 (a fixture: pytest finds it here)
