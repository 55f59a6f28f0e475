return { first = 1, second = 2 }
