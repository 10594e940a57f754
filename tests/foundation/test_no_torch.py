"""The grading side never imports torch or triton."""

import subprocess
import sys


def test_importing_d2kgrade_and_cli_does_not_import_torch():
    code = (
        "import sys, d2kgrade, d2kgrade.cli, d2kgrade.validate, d2kgrade.suite;"
        "from d2kgrade.cli import app;"
        "bad = [m for m in ('torch', 'triton') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_grading_works_with_torch_blocked():
    """Run `tasks validate` and `tasks list` in a process where importing torch raises."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'triton'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from d2kgrade.cli import main\n"
        "sys.argv = ['d2kgrade', 'tasks', 'list', '--json']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"softmax"' in proc.stdout
