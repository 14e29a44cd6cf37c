# expect: accept
def epi(accum, bias: "1,N"):
    x = accum * 0.5 + bias
    x = relu(x) - 0.25
    x = sigmoid(x) * 2
    x = x + accum
    x = tanh(x) * 3
    x = x / 1.5
    D = maximum(x, -2.0)
    return D
