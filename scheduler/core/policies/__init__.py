"""Built-in policies, one module per paper; importing this package registers them all."""

# ruff: noqa: I001  (one import per line, so that modules can be added line by line)

from . import fifo  # noqa: F401
from . import hesrpt  # noqa: F401
from . import srtf  # noqa: F401
from . import themis  # noqa: F401
from . import tiresias  # noqa: F401
from . import optimus  # noqa: F401
from . import afs  # noqa: F401
from . import pollux  # noqa: F401
from . import sia  # noqa: F401
from . import qssf  # noqa: F401
from . import pollux_unaware  # noqa: F401
from . import gavel  # noqa: F401
from . import slurm_backfill  # noqa: F401
