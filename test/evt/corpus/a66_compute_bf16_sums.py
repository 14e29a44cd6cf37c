# expect: accept
# args: --shape 128,256,2 --compute bf16 --dtype bf16
def epi(accum, C):
    x = accum - C
    r = sum(x, dim=0)
    c = sum(x, dim=1)
    s = sum(x, dim=(0, 1))
    m = max(x, dim=(0, 1))
    D = x
    return D, r, c, s, m
