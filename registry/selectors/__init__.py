def pk_like(value: object) -> bool:
    """Whether `value` reads as a primary key: ASCII digits only ("²" and "٣" are digits too)."""
    text = str(value)
    return text.isascii() and text.isdigit()
