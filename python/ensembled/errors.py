"""The package's exceptions: one base class, and what each way of failing carries.

Every error the package raises on purpose is an EnsembledError (ValueError and OSError stay
for a caller's own mistakes and the file system's). Their texts are ensembled's own:

- Refused: the daemon answered {"ok": false, "error": ...}. str() is what `ensemblectl <cmd>`
  prints after "ensemblectl <cmd>: " (the error, then "  pointer: message" per config error
  when there are several); .errors holds the list, .reply the whole answer. ensemblectl exits
  78 (permanent) on it.
- DaemonUnreachable: no answer (no socket, refused, timed out, not JSON), in ensemblectl's
  words ("connect PATH (is the daemon running?): No such file or directory"). ensemblectl
  exits 1 (transient) on it.
- PredictError: `ensemblectl predict` or `export` failed; str() is its stderr, .exit_code its
  status.
- NotCommitted: a round the run has not committed (the text `ensemblectl predict` prints).
- CorruptState: a file of the state directory that is not what ensembled writes, naming it
  (a journal line: "PATH:LINE: not a journal record", as ensembled's own reader says).
- MutationOutputError: what a mutation command was about to print is not what the
  `command` policy accepts.
"""


class EnsembledError(Exception):
    """Base class of every error the package raises on purpose."""


class Refused(EnsembledError):
    """The serve daemon refused a request: its reply had "ok": false."""

    def __init__(self, reply):
        self.reply = reply
        self.error = reply.get("error", "refused")
        self.errors = reply.get("errors") or []
        text = self.error
        if len(self.errors) > 1:  # as ensemblectl prints them (ctl/serve_commands.cpp Ask)
            text += "".join("\n  %s: %s" % (e.get("pointer", "/"), e.get("message", "")) for e in self.errors)
        super().__init__(text)


class DaemonUnreachable(EnsembledError):
    """No answer from a control socket."""


class PredictError(EnsembledError):
    """`ensemblectl predict` or `export` exited non-zero; the message is its stderr."""

    def __init__(self, message, exit_code):
        self.exit_code = exit_code
        super().__init__(message)


class NotCommitted(EnsembledError, LookupError):
    """A round the run has not committed."""


class CorruptState(EnsembledError):
    """A state-directory file that is not what ensembled writes."""


class MutationOutputError(EnsembledError, ValueError):
    """A mutation command's decision that the `command` policy would refuse."""
