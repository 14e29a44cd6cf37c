# expect: accept
# The CUTLASS seed bug: D = accum with a user; sm90 rewrites instead of emitting EVTD.
def evt_seed(accum):
    D = accum
    E = D + 1
    return D, E
