# expect: error: (rule reduction-use)
def epi(accum):
    r = sum(accum, dim=1)
    D = accum + r
    return D, r
