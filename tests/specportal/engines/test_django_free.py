from __future__ import annotations

import subprocess
import sys


def test_the_engines_package_imports_no_django() -> None:
    code = (
        "import sys, specportal.engines.flags, specportal.engines.document, "
        "specportal.engines.launch, specportal.engines.importer, specportal.engines.lint, "
        "specportal.engines.versions, "
        "specportal.cli.lint, specportal.cli.launch_command, specportal.cli.import_command; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
