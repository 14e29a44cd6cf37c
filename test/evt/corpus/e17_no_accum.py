# expect: error: the epilogue needs a parameter named 'accum'
def epi(C):
    D = C
    return D
