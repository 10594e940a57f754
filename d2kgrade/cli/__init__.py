"""The CLI, the only edge: typer commands parse options, call one library function, render with rich.

Each module of this package that defines ``register(app)`` adds its commands; :func:`main` finds them all, so a
new command is one new module; a module imports only typer and :mod:`d2kgrade.cli._common` at start-up, and
everything heavier (pandas, rich.table, the runner) inside its commands.

Exit codes, the same for every command: 0 ok; 1 the thing checked failed (an invalid suite, a failing expert
kernel, episodes that failed on the API, nothing to score) or a user error (:class:`~d2kgrade.errors.D2KError`,
printed as one line, never a traceback); 2 a usage error (unknown option, bad value); 130 interrupted (Ctrl-C),
143 terminated (SIGTERM), 129 hung up (SIGHUP): each handled like Ctrl-C.
"""

from __future__ import annotations

import errno
import importlib
import logging
import pkgutil
import signal
import sys

import typer

from d2kgrade import __version__
from d2kgrade.cli._common import err_console, print_error
from d2kgrade.errors import D2KError, SpecError, Terminated

app = typer.Typer(
    name="d2kgrade",
    help="Evaluate kernel-writing agents: tasks, sandboxed evaluation, paired agent runs, grading and reports.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"d2kgrade {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More log output (-v info, -vv debug)."),
) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _register_all() -> None:
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_all()


def _on_signal(signum: int, frame: object) -> None:
    raise Terminated(signum)


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP end the command the way Ctrl-C does (its cleanup runs), as :class:`Terminated`."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def main() -> None:
    """Console entry point: runs the app and turns its outcome into the exit code (see the module docstring)."""
    install_signal_handlers()
    try:
        rc = app(standalone_mode=False)
    except SpecError as exc:
        for p in exc.problems:
            print_error(p)
        sys.exit(1)
    except D2KError as exc:
        print_error(exc)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Terminated as exc:
        err_console.print(f"terminated ({signal.Signals(exc.signum).name})")
        sys.exit(128 + exc.signum)
    except OSError as exc:  # a file the user named cannot be written or read (not a directory, permissions, full)
        if exc.filename is None or exc.errno == errno.EPIPE:
            raise
        print_error(f"{exc.filename}: {exc.strerror or exc}")
        sys.exit(1)
    except Exception as exc:  # usage errors (unknown option, bad value) arrive here in non-standalone mode
        if isinstance(exc, _click_exception_types()):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        raise
    # In non-standalone mode click *returns* the code of a typer.Exit (and 130 for Ctrl-C) instead of exiting.
    sys.exit(rc if isinstance(rc, int) else 0)


def _click_exception_types() -> tuple[type[BaseException], ...]:
    """Click's exception class, whether typer uses the click package or its own vendored copy (typer >= 0.25)."""
    types: list[type[BaseException]] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        types.append(module.ClickException)
    return tuple(types)
