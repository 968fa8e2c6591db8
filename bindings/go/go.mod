module deft.dev/deft

go 1.19
