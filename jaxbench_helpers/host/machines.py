"""This host's hardware, and which machine names under a results folder it may add results to.

    python3 -m jaxbench_helpers machine [--results-dir results]
    python3 -m jaxbench_helpers machine --adopt NAME [--results-dir results]

``--adopt NAME`` keeps this host's processor (``hardware.txt``) beside results that were made
before jaxbench kept one, on your word that this host made them: compare a figure first (the
``bench_dispatch.JitTrivial`` latency or the 1000x1000 matmul of the newest release in the
dashboard against one ``asv run`` here). Exit codes: 0, 2 refused.
"""

import argparse
import os
import sys

from ..common import machine, paths


def status(name, results_dir, found, hardware):
    """One line on whether this host may add results under ``name``."""
    try:
        machine.check(name, results_dir, found, hardware)
    except machine.MachineMismatch as err:
        return f"{name}: not from this host: {err}"
    return f"{name}: this host"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m jaxbench_helpers machine",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=paths.RESULTS,
                        help="the results folder (default: %(default)s)")
    parser.add_argument("--adopt", metavar="NAME",
                        help="keep this host's processor beside NAME's results, made before "
                        f"jaxbench kept one ({machine.HARDWARE_FILE})")
    args = parser.parse_args(argv)
    found, hardware = machine.facts(), machine.identity()
    if args.adopt:
        try:
            machine.adopt(args.adopt, args.results_dir, found, hardware)
        except machine.MachineMismatch as err:
            print(f"jaxbench machine: {err}", file=sys.stderr)
            return 2
        print(f"jaxbench machine: {os.path.join(args.results_dir, args.adopt)} is this host's: "
              f"{machine.describe_hardware(hardware)}")
        return 0
    print(f"this host: {machine.describe(found)}; "
          f"{machine.describe_hardware(hardware) or 'no /proc/cpuinfo'}")
    print(f"default name: {machine.machine_name()}")
    folders = sorted(os.listdir(args.results_dir)) if os.path.isdir(args.results_dir) else []
    # a name's folder holds asv's machine.json, or only hardware.txt after a failed first run
    names = [d for d in folders
             if os.path.isfile(os.path.join(args.results_dir, d, "machine.json"))
             or machine.read_hardware(os.path.join(args.results_dir, d)) is not None]
    for name in names:
        print(status(name, args.results_dir, found, hardware))
    return 0


if __name__ == "__main__":
    sys.exit(main())
