"""One budgeted object as the layers below the wrappers see it: its count, lock, history and
the warm traces lent to it (`ledger`)."""
