"""Team Spark clusters (`odin cluster`, the odin_*_cluster DAGs): spec, lifecycle, and the REST secret."""
