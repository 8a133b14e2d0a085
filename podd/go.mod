module cubepod.local/podd

go 1.25
