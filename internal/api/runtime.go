package api

import "strings"

// Runtime keys of NodeInfo.Runtimes, and how a value names an image.
const (
	RuntimeNvcc  = "nvcc"
	RuntimeImage = "image "
	// RuntimeVenv: a `python:` run on the host gets a fresh virtual
	// environment; its value says how it is made.
	RuntimeVenv = "venv"
)

// RuntimePython is the key of Python version v ("3.12" → "python3.12").
func RuntimePython(v string) string { return "python" + v }

// RuntimeImageOf is the image a runtime's value names ("" when it is a
// binary of the host).
func RuntimeImageOf(value string) string {
	img, _ := strings.CutPrefix(value, RuntimeImage)
	if img == value {
		return ""
	}
	return img
}
