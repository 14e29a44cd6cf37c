# expect: accept
# x_1 / x1 and element_c collide after CUTLASS's CamelCase mangling.
def epi(accum, x_1, x1, element_c: "1,N"):
    ElementC = x_1 + x1
    D = accum + ElementC * element_c
    return D, ElementC
