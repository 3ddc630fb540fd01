// Draws each chart from its Vega-Lite spec (in the page) with the bundled
// Vega; without JavaScript the static image stays in its place. A chart that
// cannot be drawn says why in its data-error attribute and keeps its image.
for (const el of document.querySelectorAll(".chart[data-spec]")) {
  try {
    const spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
    vegaEmbed(el, spec, { renderer: "svg", actions: false }).catch((err) => {
      el.dataset.error = String(err);
    });
  } catch (err) {
    el.dataset.error = String(err);
  }
}
