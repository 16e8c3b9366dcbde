"""One budgeted object as the layers below the wrappers see it: its `handle` (what is fixed
at wrap time, a weak reference to the object, its seams, each layer's own state) and its
count (`ledger`: lock, history and the warm traces lent to it)."""
