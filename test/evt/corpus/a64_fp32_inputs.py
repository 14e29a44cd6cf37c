# expect: accept
# args: --dtype f32 --inputs f32
def epi(accum, C, X):
    y = gelu(accum) * X
    D = y + C
    s = sum(y, dim=(0, 1))
    return D, s
