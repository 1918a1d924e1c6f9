package api_test

func runChild(dir string) int { return 0 }
