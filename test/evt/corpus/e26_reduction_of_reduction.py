# expect: error: (rule reduction-use)
def epi(accum):
    D = accum
    r = sum(accum, dim=0)
    s = sum(r, dim=1)
    return D, s
