"""TFC000: the file could not be read or parsed."""

from __future__ import annotations

from tfcheck.findings import Severity
from tfcheck.rule import Rule


class ParseError(Rule):
    """The file could not be read or parsed, so none of its code was checked.

    ## What it does
    Reports a Python file that tfcheck could not read (permissions, broken symlink, invalid
    encoding, NUL bytes) or parse (syntax error), at the place where reading or parsing failed.

    ## Why is this bad
    Nothing in the file was analysed: any tf.function pitfall in it goes unreported. The rest of the
    run goes on.

    ## Example
    ```python
    def f(x)
        return x
    ```

    ## Use instead
    ```python
    def f(x):
        return x
    ```
    """

    code = "TFC000"
    name = "parse-error"
    severity = Severity.ERROR
    reported_by_engine = True
