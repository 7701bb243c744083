"""The `bacc-audit` command line: app.py is the console script's entry point."""

import os

# numpy (which pyarrow imports) starts OpenBLAS's thread pool as it is imported: about 0.09 s
# of CPU a command (of ~0.9 s to start one) for threads nothing here uses, as the product
# does no linear algebra. One thread, unless whoever runs the command says otherwise; set
# before any module of the command imports numpy, and inherited by the processes it starts.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
