"""The exceptions of narwhal_trial; each carries the exit code the command layer turns it into.

Every error exits 1, "the helper reported a blocking error" in the runbook's table. Exit 2 is never
an error: it is a judged outcome the commands return (``run``: attainment or client scheduling
missed, with ``summary.json`` written; ``check``: a check failed; ``reconcile``: a record does not
reconcile; ``predict``: the prediction misses the target).

TrialError              root; exit 1 (a blocking error, runbook table)
├── TrialUsageError     bad option values, a bad ``--base``, an unset ``--api-key-env`` variable,
│   │                   unusable fleet, store or limits files (as the command line's own usage
│   │                   errors, which exit 1 too)
│   └── OutsideDomainError (``_predict``) predict refuses to extrapolate beyond the profiles
├── OutputPathError     an ``--out`` that is a symlink, a file, already holds anything, or lies
│                       where it cannot be created (an unwritable or unenterable folder)
├── WorkloadError       an unreadable or invalid workload, or one the engine cannot serve
├── DrainError          no drain gauge on the metrics page, or no drain in time
├── PrepareError        the engine did not give the seed completion's token ids
├── ReadError           an unreadable run record, journal, launch record or profile store
└── NotComparableError  ``compare``: two sides of different workloads or targets, a run that did not
                        keep its schedule, or profile stores without an engine in common
"""

from __future__ import annotations


class TrialError(Exception):
    """Root of every error of narwhal_trial; ``exit_code`` is what the command exits with."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TrialUsageError(TrialError):
    """Invalid usage: bad option values or unusable input files (exit 1, as the command line's own
    usage errors).

    Not exit 2: the runbook sends an operator who sees 2 to ``summary.json``, which a run refused
    before it started never wrote.
    """


class OutputPathError(TrialError):
    """An ``--out`` refused: a symlink, not a folder, not empty, or not creatable (exit 1).

    Not exit 2: the runbook sends an operator who sees 2 to the ``summary.json`` in ``--out``,
    which for a refused folder is an earlier run's verdict, not this one's.
    """


class WorkloadError(TrialError):
    """The workload file is unreadable or invalid, or does not fit the served model."""


class DrainError(TrialError):
    """The fleet did not drain: no known gauge on the metrics page, or the timeout passed."""


class PrepareError(TrialError):
    """``prepare`` could not obtain the seed completion's token ids from the engine."""


class ReadError(TrialError):
    """A run record, router journal, launch record or (``compare --profiles``) profile store
    could not be read or parsed."""


class NotComparableError(TrialError):
    """``compare`` refused two sides: different workloads (shape or seed) or SLO targets, a run
    whose client did not keep its schedule, no offered load in common, or (``--profiles``) no
    engine in common."""
