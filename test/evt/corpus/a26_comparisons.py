# expect: accept
def epi(accum, C):
    ge = accum >= C
    ne = accum != 0
    lt = accum < -1
    le = C <= 0.5
    eq = accum == C
    D = ge * accum + ne + lt * 2 + le * 3 + eq
    return D
