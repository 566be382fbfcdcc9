package validation

import (
	"bytes"
	"math/bits"
)

// The two quantity checks of a written body (ValidateQuantityTexts before
// it is decoded, ValidateQuantitiesAsWritten after) each decode the body
// generically to find the texts of its quantities. Nearly every body needs
// neither: its quantities are plain ("100m", "1Gi", "2") and no text holds
// a long exponent. The scans below read the body's bytes once, without
// allocating, and let both checks return at once when nothing in the body
// could give them something to say. They are conservative: a body they
// pass on is checked as before.

// hasLongExponent reports whether data holds a digit or '.' followed by an
// 'e' or 'E', an optional sign and four or more digits, or a run of 1000
// digits: the texts whose exponent ValidateQuantityTexts must look at. It
// matches where the regular expression
// `[0-9.][eE][+-]?[0-9]{4,}|[0-9]{1000}` matches, anywhere in data.
func hasLongExponent(data []byte) bool {
	run := 0 // digits ending at i-1
	for i := 0; i < len(data); i++ {
		c := data[i]
		if isDigit(c) {
			run++
			if run >= 1000 {
				return true
			}
			continue
		}
		run = 0
		if (c != 'e' && c != 'E') || i == 0 || !(isDigit(data[i-1]) || data[i-1] == '.') {
			continue
		}
		j := i + 1
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		n := 0
		for j < len(data) && isDigit(data[j]) && n < 4 {
			j++
			n++
		}
		if n == 4 {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// mayHoldInexactQuantity reports whether a JSON body may hold a quantity
// whose amount apimachinery's parser changes (rounds below 1n, caps at
// 2^63-1 with a binary suffix) or whose decimal exponent is out of bounds:
// whether ValidateQuantitiesAsWritten must look. It looks at every string
// and number token of data: one that reads as a quantity (after
// strings.TrimSpace, as Quantity.UnmarshalJSON trims) must be plainText.
// A string with an escaped quote, backslash, slash or backspace is no
// quantity (managedFields' keys have them); one with another escape is not
// read here (it may unescape to anything) and makes the body not plain.
// A token that is not a quantity's text cannot be in a field that took
// one: the body decoded.
func mayHoldInexactQuantity(data []byte) bool {
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '"':
			j := i + 1
			escaped, notQuantity := false, false
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' && j+1 < len(data) {
					j++
					escaped = true
					// '"', '\\', '/' or a backspace in a text is in no
					// quantity, and strings.TrimSpace leaves it there.
					switch data[j] {
					case '"', '\\', '/', 'b':
						notQuantity = true
					}
				}
				j++
			}
			switch {
			case notQuantity:
			case escaped:
				return true // \n, \t, \r, \f or \u: may spell a quantity
			case !plainText(bytes.TrimSpace(data[i+1 : j])):
				return true
			}
			i = j
		case c == '-' || isDigit(c):
			j := i + 1
			for j < len(data) && (isDigit(data[j]) || data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] == '+' || data[j] == '-') {
				j++
			}
			if !plainText(data[i:j]) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

// plainText reports whether text, if it is a quantity's text at all, is
// one whose amount the parser keeps exactly and whose decimal exponent is
// small: a mantissa of at most 18 digits, at most 9 of them after the
// point, then nothing, a decimal suffix whose fraction stays at or above
// 1n (n takes no fraction, u three digits, m six), or a binary suffix
// whose amount stays below 2^63-1. A text that does not read as a
// quantity is plain (it is in no quantity's field), as is one without a
// mantissa that apimachinery reads as 0 ("k", "+"); one with an exponent
// ("1e3", "e1001") is not (the full check reads it).
func plainText(text []byte) bool {
	i := 0
	if i < len(text) && (text[i] == '+' || text[i] == '-') {
		i++
	}
	var whole uint64
	intDigits, fracDigits := 0, 0
	for i < len(text) && isDigit(text[i]) {
		if intDigits < 19 {
			whole = whole*10 + uint64(text[i]-'0')
		}
		intDigits++
		i++
	}
	if i < len(text) && text[i] == '.' {
		i++
		for i < len(text) && isDigit(text[i]) {
			fracDigits++
			i++
		}
	}
	if intDigits+fracDigits == 0 {
		// No mantissa: apimachinery reads "k", "+" or "e5" as 0, and
		// only an exponent can make that amount's text out of bounds.
		rest := text[i:]
		return len(rest) == 0 || (rest[0] != 'e' && rest[0] != 'E') || !quantitySuffix(rest)
	}
	if intDigits+fracDigits > 18 {
		return !quantitySuffix(text[i:])
	}
	switch s := string(text[i:]); s {
	case "", "k", "M", "G", "T", "P", "E":
		return fracDigits <= 9
	case "m":
		return fracDigits <= 6
	case "u":
		return fracDigits <= 3
	case "n":
		return fracDigits == 0
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
		// The amount is below (whole+1)·2^shift; below 2^63-1 if that
		// fits in 63 bits. Fractions of at most 9 digits stay at or
		// above 1n after the shift.
		shift := 10 * (bytes.IndexByte([]byte("KMGTPE"), s[0]) + 1)
		return fracDigits <= 9 && bits.Len64(whole+1)+shift <= 62
	default:
		return !quantitySuffix(text[i:])
	}
}

// quantitySuffix reports whether s is a suffix a quantity may end with:
// none, a binary or decimal SI suffix, or a decimal exponent.
func quantitySuffix(s []byte) bool {
	switch string(s) {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E":
		return true
	}
	if len(s) < 2 || (s[0] != 'e' && s[0] != 'E') {
		return false
	}
	s = s[1:]
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if !isDigit(c) {
			return false
		}
	}
	return true
}
