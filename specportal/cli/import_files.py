"""``specportal import``: other tools' result files into an import-mode experiment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specportal.cli import CliError

HELP = "import other tools' result files into an import-mode experiment on a portal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="result files (gzip allowed)")
    parser.add_argument("--portal", required=True, help="the portal's URL")
    parser.add_argument("--experiment", required=True, type=int, help="the experiment's id")
    parser.add_argument("--arm", help="the arm's label (needed when the experiment has several)")
    parser.add_argument("--cell", metavar="WORKLOAD/LOAD",
                        help="default: the load level the file's own load fields describe")  # fmt: skip
    parser.add_argument("--repetition", type=int, help="default: the next free one")


def run(args: argparse.Namespace) -> int:
    from specportal.cli.portal import Portal, PortalError, PortalUnreachable, token_from_environment
    from specportal.formats import FormatError, aiperf, read_files

    files = []
    for name in args.files:
        try:
            files.append((Path(name).name, Path(name).read_bytes()))
        except OSError as exc:
            raise CliError(f"cannot read {name}: {exc.strerror}") from None
    try:
        runs = read_files(files)  # checked here first: a bad file never reaches the portal
    except FormatError as exc:
        raise CliError(str(exc)) from None
    try:
        portal = Portal(args.portal, token_from_environment())
    except PortalError as exc:
        raise CliError(str(exc)) from None
    params = {k: v for k, v in (("experiment", args.experiment), ("arm", args.arm),
                                ("cell", args.cell), ("repetition", args.repetition)) if v}  # fmt: skip
    # AIPerf's aggregate and per-request files go together (one run); every other file alone.
    paired = any(r.format == aiperf.FORMAT and "records" in r.layout for r in runs)
    batches = [files] if paired else [[f] for f in files]
    try:
        for batch in batches:
            answer = portal.request(
                "POST", "/api/v1/imports/", params=params,
                files=[("file", (name, data, "application/octet-stream")) for name, data in batch],
            )  # fmt: skip
            for made, origin, row in zip(
                answer["created"], answer["from"], answer["runs"], strict=True
            ):
                state = "imported" if made else "already imported"
                print(f"{origin}: run {row['id']} {row['arm']} {row['workload']}/{row['load']} "
                      f"repetition {row['repetition']} {state} ({row['imported_label']})")  # fmt: skip
    except PortalError as exc:
        raise CliError(str(exc)) from None
    except PortalUnreachable as exc:
        raise CliError(str(exc), exit_code=4) from None
    finally:
        portal.close()
    sys.stdout.flush()
    return 0
