// coil: the command-line driver.
int main() { return 0; }
