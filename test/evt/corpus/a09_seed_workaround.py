# expect: accept
def evt_direct_store(accum):
    F = accum
    D = F + 1
    return D, F
