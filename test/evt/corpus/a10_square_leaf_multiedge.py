# expect: accept
# x * x on a leaf: two operands from one value (cutlass#2349)
def epi(accum):
    D = accum * accum
    return D
