"""`python -m odin.dashboards`: writes the Grafana files into odin/dashboards/grafana/; `--check`: exits 1, naming
each file, when the checked-in ones differ from what it would write. `--out`, `--victoria-metrics-url` and
`--dashboards-path` render a deployment's copy elsewhere (the checked-in files keep the defaults)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odin.dashboards.platform import DASHBOARDS
from odin.dashboards.render import DASHBOARDS_PATH, GRAFANA_DIR, VICTORIA_METRICS_URL, differences, files, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odin.dashboards", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 on a difference")
    parser.add_argument("--out", type=Path, default=GRAFANA_DIR, help="where grafana/ goes (default: in the repo)")
    parser.add_argument("--victoria-metrics-url", default=VICTORIA_METRICS_URL, help="the datasource's URL")
    parser.add_argument("--dashboards-path", default=DASHBOARDS_PATH, help="where Grafana reads the JSON models")
    args = parser.parse_args(argv)
    expected = files(DASHBOARDS, args.victoria_metrics_url, args.dashboards_path)
    if args.check:
        problems = differences(expected, args.out)
        for line in problems:
            print(line)
        if problems:
            print("regenerate with `python -m odin.dashboards`", file=sys.stderr)
        return 1 if problems else 0
    for path in write(expected, args.out, prune=args.out.resolve() == GRAFANA_DIR):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
