module github.com/knemesis/knemesis

go 1.26.0
