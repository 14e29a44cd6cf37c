# expect: accept
# args: --shape 128,256,3
def epi(accum, C):
    x = accum - C
    r = sum(x, dim=0)
    c = max(x, dim=1)
    s = sum(x, dim=(0, 1))
    D = x
    return D, r, c, s
