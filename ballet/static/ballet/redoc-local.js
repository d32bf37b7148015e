// ReDoc's bundle draws its maker's logo from their CDN at the foot of its menu, with no option to
// leave it out (ballet/api_docs.py). Loaded before the bundle, this keeps any image of ReDoc's from
// asking another host: its address becomes an empty image, so the page's policy has nothing to
// refuse and the link's text ("API docs by Redocly") stands alone.
(function () {
  "use strict";
  var EMPTY = "data:image/gif;base64,R0lGODlhAQABAAAAACH5BAEKAAEALAAAAAABAAEAAAICTAEAOw==";
  function local(value) {
    var url = new URL(String(value), document.baseURI);
    return url.protocol === "data:" || url.origin === location.origin ? value : EMPTY;
  }
  var setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (this instanceof HTMLImageElement && String(name).toLowerCase() === "src") {
      value = local(value);
    }
    return setAttribute.call(this, name, value);
  };
  var src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
  Object.defineProperty(HTMLImageElement.prototype, "src", {
    configurable: true,
    enumerable: src.enumerable,
    get: src.get,
    set: function (value) { src.set.call(this, local(value)); },
  });
})();
