"""`airflow <command>` as the stack runs it (ansible/roles/airflow), ending without Python's last garbage collection.

An interpreter's exit collects its whole heap once more: Airflow's API server (~290 MB) spent 5-7 s of CPU in it
after serving its last request (py-spy: `gc_collect_main`, no Python frame), so every `odin down` and every restart
of Airflow waited on it. Frozen at exit, the heap is left to the OS as a killed process's is; exit handlers still
run (docs/decisions.md). Airflow's command runs as its `airflow` program would (its `__main__`): Odin does not use
Airflow as a library (only the DAGs do, tests/test_architecture.py).
"""

import gc
import runpy
import sys

if __name__ == "__main__":
    sys.argv[0] = "airflow"  # its usage and errors name the command as users know it
    try:
        runpy.run_module("airflow", run_name="__main__")
    finally:
        gc.freeze()
