"""Stand-in executables that print what the real nvidia-smi, vllm and llama-server print.

This machine has no GPU: the tests put these on PATH for the agent (in-process or as a real
subprocess) to read, exactly as it reads the real tools.
"""

from __future__ import annotations

import stat
from pathlib import Path

# `nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader,nounits`
# on a two-GPU H100 host (driver 550.54.15).
H100_CSV = (
    "0, GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
    "1, GPU-0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
)
# The banner of plain `nvidia-smi` before R610, and from R610 (KMD / CUDA UMD labels).
LEGACY_BANNER = """Sun Nov 29 20:13:45 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   31C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""
R610_BANNER = """Sun Jun  7 08:16:57 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |
+-----------------------------------------+------------------------+----------------------+
"""
SMI_Q = """
==============NVSMI LOG==============

Timestamp                                 : Sat Oct 10 17:02:53 2020
Driver Version                            : 450.66
CUDA Version                              : 11.0

Attached GPUs                             : 1
"""
DRIVER_DOWN = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


def stand_in(bin_dir: Path, name: str, script: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def nvidia_smi(bin_dir: Path, csv: str, banner: str = LEGACY_BANNER) -> Path:
    """Answers the CSV query with ``csv`` and anything else with the banner, as the real one."""
    return stand_in(
        bin_dir,
        "nvidia-smi",
        'case "$1" in\n'
        f"  --query-gpu=index,uuid,name,memory.total,driver_version) printf '%s' '{csv}' ;;\n"
        f"  *) printf '%s' '{banner}' ;;\n"
        "esac\n",
    )
