# expect: error: statement after 'return'
def epi(accum):
    D = accum
    return D
    E = D
