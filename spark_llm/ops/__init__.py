"""The operator CLI's commands (`spark-llm preflight|status|logs|smoke|restart`), one module each.

Every command reads the stack's config through the Pulumi CLI and builds the same plan as the Pulumi program
(spark_llm.config.parse, spark_llm.plan.deployment.build_plan), and reaches the nodes with spark_llm.remote.ssh.
"""
