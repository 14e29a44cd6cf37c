# expect: error: (rule alignment)
# args: --shape 256,100
def epi(accum, C):
    D = accum + C
    return D
