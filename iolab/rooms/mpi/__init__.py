"""The MPI room: timed iterations of every rank, with what each launch
decided and ran."""
