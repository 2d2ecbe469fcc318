"""spark-llm Pulumi program: load the stack config, plan the stack, declare its resources, export its outputs."""

import signal

# When an update fails or is cancelled (Ctrl-C), Pulumi's language host stops the program with SIGINT; Python would
# answer with a KeyboardInterrupt traceback of whatever thread it hit, under the real error. The engine holds the
# state, so the program may simply end. First, before the imports that take a second (the providers' SDKs).
signal.signal(signal.SIGINT, signal.SIG_DFL)

import pulumi  # noqa: E402

from components import bootstrap  # noqa: E402
from components.stack import SparkStack, SparkStackArgs  # noqa: E402

config = bootstrap.load()
# One builder answers what the stack deploys (spark_llm.plan.stack): `spark-llm` asks the same one.
stack = SparkStack("stack", SparkStackArgs(config=config, plan=bootstrap.stack_plan(config)))
for key, value in stack.outputs.items():
    pulumi.export(key, value)
